/*
 * backend_select.c -- picks the backend for llm_device.
 *
 * The CUDA backend is a separate shared object, libllm_cuda.so, built
 * whenever nvcc exists and installed next to whatever holds libllm (the
 * nginx module or the llm binary).  It is opened with dlopen only when a
 * GPU is wanted, so neither the module nor the CLI needs CUDA's libraries
 * to load, and a machine without a GPU simply serves from the CPU.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "util/util.h"

typedef llm_backend *(*llm_cuda_create_fn)(const llm_model *m,
    const llm_backend_config *cfg, char *err);
typedef int (*llm_cuda_count_fn)(char *err);


/* Opens libllm_cuda.so from LLM_CUDA_LIBRARY, else from the directory of
 * the object this code is linked into. */
static void *
llm_cuda_open(char *err)
{
    const char  *env = getenv("LLM_CUDA_LIBRARY");
    char         path[PATH_MAX], *slash;
    Dl_info      info;
    void        *h;

    if (env && env[0]) {
        snprintf(path, sizeof(path), "%s", env);
    } else if (dladdr((void *) llm_cuda_open, &info) && info.dli_fname) {
        snprintf(path, sizeof(path), "%s", info.dli_fname);
        slash = strrchr(path, '/');
        snprintf(slash ? slash + 1 : path,
                 sizeof(path) - (slash ? (size_t) (slash + 1 - path) : 0),
                 "libllm_cuda.so");
    } else {
        snprintf(path, sizeof(path), "libllm_cuda.so");
    }
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        llm_errf(err, "CUDA backend not available (%s)", dlerror());
    }
    return h;
}


llm_backend *
llm_backend_open(const llm_model *m, const char *device,
    const llm_backend_config *cfg, char *reason, char *err)
{
    llm_backend_config   c = *cfg;
    llm_cuda_create_fn   create;
    llm_cuda_count_fn    count;
    char                 why[LLM_ERR_LEN];
    void                *h;
    int                  want_cuda, n, dev = 0;
    llm_dtype            blocks;
    char                *end;

    if (device == NULL || device[0] == '\0') {
        device = "auto";
    }
    want_cuda = strncmp(device, "cuda:", 5) == 0;
    if (want_cuda) {
        dev = (int) strtol(device + 5, &end, 10);
        if (end == device + 5 || *end != '\0' || dev < 0) {
            llm_errf(err, "llm_device \"%s\": expected cuda:N", device);
            return NULL;
        }
    } else if (strcmp(device, "auto") != 0 && strcmp(device, "cpu") != 0) {
        llm_errf(err, "llm_device \"%s\": expected auto, cpu or cuda:N",
                 device);
        return NULL;
    }

    if (strcmp(device, "cpu") == 0) {
        llm_errf(reason, "cpu: llm_device cpu");
        return llm_backend_cpu_create(m, &c, err);
    }
    /* the CUDA backend has no kernels for block formats (and says so
     * when asked for by name) */
    blocks = llm_model_block_format(m);
    if (!want_cuda && blocks != LLM_DTYPE_COUNT) {
        llm_errf(reason, "cpu: %s weights run on the CPU",
                 llm_dtype_name(blocks));
        return llm_backend_cpu_create(m, &c, err);
    }

    h = llm_cuda_open(why);
    if (h != NULL) {
        create = (llm_cuda_create_fn) dlsym(h, "llm_backend_cuda_create");
        count = (llm_cuda_count_fn) dlsym(h, "llm_cuda_device_count");
        if (create == NULL || count == NULL) {
            llm_errf(why, "libllm_cuda.so lacks its entry points");
        } else if ((n = count(why)) > dev) {
            c.device = dev;
            llm_errf(reason, "cuda:%d: %d CUDA device%s found", dev, n,
                     n == 1 ? "" : "s");
            /* the library stays loaded for the life of the process */
            return create(m, &c, err);
        } else if (n >= 0) {
            llm_errf(why, "%d CUDA device%s found", n, n == 1 ? "" : "s");
        }
    }
    if (want_cuda) {
        llm_errf(err, "llm_device %s: %s", device, why);
        return NULL;
    }
    llm_errf(reason, "cpu: no usable GPU (%s)", why);
    return llm_backend_cpu_create(m, &c, err);
}
