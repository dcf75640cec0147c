/* cuda_fp16.h (emulation): the types live in the emulated cuda_bf16.h. */
#include "cuda_bf16.h"
