/*
 * rope.h -- RoPE's inverse frequencies, Hugging Face's definition, with
 * Llama 3's rope_scaling when the config sets it (or GGUF's per-frequency
 * divisors).  Header-only, so the CPU
 * backend and the CUDA backend (a shared object of its own) compute them
 * from the one definition.
 */
#ifndef LLM_ROPE_H
#define LLM_ROPE_H

#include <math.h>

#include "model.h"

/* inv_freq[i] for i < head_dim / 2: theta^(-2i/d), then llama3's
 * wavelength-dependent scaling (HF _compute_llama3_parameters). */
static inline void
llm_rope_inv_freq(const llm_config *c, float *inv_freq)
{
    int     i, half = c->head_dim / 2;
    double  f, wavelen, lo_wl, hi_wl, smooth;

    for (i = 0; i < half; i++) {
        f = 1.0 / pow((double) c->rope_theta,
                      (double) (2 * i) / (double) c->head_dim);
        if (c->rope_llama3) {
            lo_wl = c->rope_original_max_pos / c->rope_low_freq_factor;
            hi_wl = c->rope_original_max_pos / c->rope_high_freq_factor;
            wavelen = 2.0 * M_PI / f;
            if (wavelen > lo_wl) {
                f = f / c->rope_factor;
            } else if (wavelen >= hi_wl) {
                smooth = (c->rope_original_max_pos / wavelen
                          - c->rope_low_freq_factor)
                         / (c->rope_high_freq_factor
                            - c->rope_low_freq_factor);
                f = (1.0 - smooth) * f / c->rope_factor + smooth * f;
            }
        }
        if (c->rope_freq_factors) {
            f /= c->rope_freq_factors[i];
        }
        inv_freq[i] = (float) f;
    }
}

#endif /* LLM_ROPE_H */
