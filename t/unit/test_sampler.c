/*
 * test_sampler.c -- the sampler on hand-made logits: greedy, seeded
 * reproducibility, temperature/top-k/top-p/min-p supports, the sampled
 * distribution against the softmax, penalties, logit bias, min_tokens,
 * logprobs against a direct log-softmax.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "tap.h"

#define V 8


static void
params(llm_sampling_params *p)
{
    llm_sampling_params_init(p, NULL);
}


static int32_t
sample(llm_sampler *s, const float *logits, const llm_sampling_params *p,
    llm_rng *rng, const int32_t *out, int n_out, llm_token_logprob *lp)
{
    float           l[V];
    int32_t         eos = 7;
    llm_sample_ctx  c = { p, NULL, 0, out, n_out, &eos, 1, rng };

    memcpy(l, logits, sizeof(l));
    return llm_sample(s, l, &c, lp);
}


int
main(void)
{
    static const float   logits[V] = { 1.0f, 3.0f, 2.0f, 0.5f, -1.0f, 2.5f,
                                       0.0f, 1.5f };
    llm_sampler          s;
    llm_sampling_params  p;
    llm_rng              rng, rng2;
    llm_token_logprob    lp;
    int                  counts[V], i, n, same, ok;
    int32_t              a[64], b[64], out[4];
    double               z, expect, chi2, lse;

    llm_sampler_init(&s, V);

    params(&p);
    p.temperature = 0.0f;
    llm_rng_seed(&rng, 1);
    tap_ok(sample(&s, logits, &p, &rng, NULL, 0, NULL) == 1,
           "greedy takes the argmax");

    params(&p);
    p.temperature = 1.0f;
    llm_rng_seed(&rng, 42);
    llm_rng_seed(&rng2, 42);
    for (i = 0, same = 1; i < 64; i++) {
        a[i] = sample(&s, logits, &p, &rng, NULL, 0, NULL);
        b[i] = sample(&s, logits, &p, &rng2, NULL, 0, NULL);
        same &= a[i] == b[i];
    }
    tap_ok(same, "the same seed gives the same samples");
    llm_rng_seed(&rng2, 43);
    for (i = 0, same = 1; i < 64; i++) {
        same &= a[i] == sample(&s, logits, &p, &rng2, NULL, 0, NULL);
    }
    tap_ok(!same, "another seed gives other samples");

    /* the sampled distribution matches softmax(logits / T): chi-square */
    p.temperature = 0.7f;
    memset(counts, 0, sizeof(counts));
    n = 200000;
    for (i = 0; i < n; i++) {
        counts[sample(&s, logits, &p, &rng, NULL, 0, NULL)]++;
    }
    for (i = 0, z = 0; i < V; i++) {
        z += exp(logits[i] / 0.7);
    }
    for (i = 0, chi2 = 0; i < V; i++) {
        expect = n * exp(logits[i] / 0.7) / z;
        chi2 += (counts[i] - expect) * (counts[i] - expect) / expect;
    }
    /* 7 degrees of freedom: P(chi2 > 24.3) = 0.001 */
    tap_ok(chi2 < 24.3, "temperature 0.7 matches the softmax (chi2 %.2f)",
           chi2);

    p.temperature = 1.0f;
    p.top_k = 2;
    for (i = 0, ok = 1; i < 2000; i++) {
        int32_t  t = sample(&s, logits, &p, &rng, NULL, 0, NULL);

        ok &= t == 1 || t == 5;
    }
    tap_ok(ok, "top_k 2 keeps the two largest");

    p.top_k = 0;
    /* probs sorted: 1 (3.0), 5 (2.5), 2 (2.0), ... ; top-p just above the
     * first two's mass keeps three tokens */
    for (i = 0, z = 0; i < V; i++) {
        z += exp(logits[i]);
    }
    p.top_p = (float) ((exp(3.0) + exp(2.5)) / z + 0.01);
    memset(counts, 0, sizeof(counts));
    for (i = 0; i < 5000; i++) {
        counts[sample(&s, logits, &p, &rng, NULL, 0, NULL)]++;
    }
    tap_ok(counts[1] && counts[5] && counts[2]
           && counts[1] + counts[5] + counts[2] == 5000,
           "top_p keeps the smallest set holding that mass");

    p.top_p = 1.0f;
    p.min_p = 0.5f;                     /* keeps p >= 0.5 * p(max) */
    for (i = 0, ok = 1; i < 2000; i++) {
        int32_t  t = sample(&s, logits, &p, &rng, NULL, 0, NULL);

        ok &= t == 1 || t == 5;         /* e^-0.5 = 0.61, e^-1 = 0.37 */
    }
    tap_ok(ok, "min_p 0.5 keeps tokens within ln 2 of the best");

    /* penalties and bias, greedy */
    params(&p);
    p.temperature = 0.0f;
    out[0] = 1;
    out[1] = 1;
    p.frequency_penalty = 0.3f;         /* 3.0 - 0.6 = 2.4 < 2.5 */
    tap_ok(sample(&s, logits, &p, &rng, out, 2, NULL) == 5,
           "frequency penalty counts repeats");
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 0.6f;          /* 3.0 - 0.6 = 2.4 */
    tap_ok(sample(&s, logits, &p, &rng, out, 2, NULL) == 5,
           "presence penalty applies once");
    p.presence_penalty = 0.0f;
    p.repetition_penalty = 1.3f;        /* 3.0 / 1.3 = 2.3 */
    tap_ok(sample(&s, logits, &p, &rng, out, 1, NULL) == 5,
           "repetition penalty divides positive logits");
    p.repetition_penalty = 1.0f;
    {
        int32_t  ids[1] = { 4 };
        float    vals[1] = { 10.0f };

        p.logit_bias_ids = ids;
        p.logit_bias_values = vals;
        p.n_logit_bias = 1;
        tap_ok(sample(&s, logits, &p, &rng, NULL, 0, NULL) == 4,
               "logit bias moves the argmax");
        p.n_logit_bias = 0;
    }
    {
        int32_t  ids[1] = { 7 };
        float    vals[1] = { 100.0f };

        p.logit_bias_ids = ids;
        p.logit_bias_values = vals;
        p.n_logit_bias = 1;
        p.min_tokens = 2;
        tap_ok(sample(&s, logits, &p, &rng, out, 1, NULL) != 7,
               "min_tokens masks EOS before it is reached");
        tap_ok(sample(&s, logits, &p, &rng, out, 2, NULL) == 7,
               "EOS is allowed once min_tokens is reached");
        p.n_logit_bias = 0;
        p.min_tokens = 0;
    }

    /* bad_words: a word's last token is masked after the tokens before it */
    {
        static const int32_t  bad_ids[] = { 1, 3, 5 }, bad_lens[] = { 1, 2 };
        float                 l[V];
        int32_t               eos = 7, after3[] = { 3 }, after2[] = { 2 };
        llm_sample_ctx        c = { &p, NULL, 0, after3, 1, &eos, 1, &rng };

        params(&p);
        p.temperature = 0.0f;
        c.bad_ids = bad_ids;
        c.bad_lens = bad_lens;
        c.n_bad = 1;                    /* [1] */
        memcpy(l, logits, sizeof(l));
        tap_ok(llm_sample(&s, l, &c, NULL) == 5, "bad word [1]: never 1");
        c.bad_ids = bad_ids + 1;        /* [3, 5] */
        c.bad_lens = bad_lens + 1;
        memcpy(l, logits, sizeof(l));
        n = llm_sample(&s, l, &c, NULL);
        c.output = after2;
        memcpy(l, logits, sizeof(l));
        tap_ok(n == 1 && llm_sample(&s, l, &c, NULL) == 1,
               "bad word [3, 5]: 5 only after 3 (the argmax 1 stays)");
        c.output = after3;
        memcpy(l, logits, sizeof(l));
        l[5] = 10.0f;
        tap_ok(llm_sample(&s, l, &c, NULL) == 1, "after 3, 5 is masked");
    }

    /* allowed_token_ids: only those, greedy the best of them; the
     * logprob stays the raw one */
    {
        static const int32_t  allowed[] = { 3, 6, 0 };

        params(&p);
        p.temperature = 1.0f;
        p.allowed_token_ids = allowed;
        p.n_allowed_token_ids = 3;
        llm_rng_seed(&rng, 9);
        memset(counts, 0, sizeof(counts));
        for (i = 0; i < 3000; i++) {
            counts[sample(&s, logits, &p, &rng, NULL, 0, NULL)]++;
        }
        tap_ok(counts[0] && counts[3] && counts[6]
               && counts[0] + counts[3] + counts[6] == 3000,
               "allowed_token_ids: 3000 samples, all of the three (%d %d %d)",
               counts[0], counts[3], counts[6]);
        p.temperature = 0.0f;
        p.logprobs = 0;
        n = sample(&s, logits, &p, &rng, NULL, 0, &lp);
        for (i = 0, z = 0; i < V; i++) {
            z += exp(logits[i]);
        }
        tap_ok(n == 0 && fabs(lp.logprob - (logits[0] - log(z))) < 1e-5,
               "allowed_token_ids, greedy: the best allowed, raw logprob");
    }

    /* logprobs come from the raw logits */
    params(&p);
    p.temperature = 0.0f;
    p.logprobs = 3;
    p.presence_penalty = 2.0f;
    out[0] = 1;
    n = sample(&s, logits, &p, &rng, out, 1, &lp);
    for (i = 0, z = 0; i < V; i++) {
        z += exp(logits[i]);
    }
    lse = log(z);
    tap_ok(n == 5 && lp.id == 5
           && fabs(lp.logprob - (logits[5] - lse)) < 1e-5,
           "chosen logprob is the raw log-softmax (%g)", lp.logprob);
    tap_ok(lp.n_top == 3 && lp.top_ids[0] == 1 && lp.top_ids[1] == 5
           && lp.top_ids[2] == 2
           && fabs(lp.top_logprobs[0] - (3.0 - lse)) < 1e-5,
           "top logprobs are the raw top 3, in order");

    /* speculative verification keeps the target distribution: whatever
     * the draft, emitted tokens follow softmax(logits / T) */
    params(&p);
    p.temperature = 0.8f;
    for (n = 0; n < 2; n++) {
        int32_t  draft = n == 0 ? 1 : 4, id;
        int      acc, n_acc = 0, trials = 200000;
        float    l[V];
        int32_t  eos = 7;
        llm_sample_ctx  c = { &p, NULL, 0, NULL, 0, &eos, 1, &rng };

        memset(counts, 0, sizeof(counts));
        for (i = 0; i < trials; i++) {
            memcpy(l, logits, sizeof(l));
            id = llm_sample_verify(&s, l, &c, draft, &acc, NULL);
            counts[id]++;
            n_acc += acc;
            ok = !acc || id == draft;
            if (!ok) {
                break;
            }
        }
        for (i = 0, z = 0; i < V; i++) {
            z += exp(logits[i] / 0.8);
        }
        for (i = 0, chi2 = 0; i < V; i++) {
            expect = trials * exp(logits[i] / 0.8) / z;
            chi2 += (counts[i] - expect) * (counts[i] - expect) / expect;
        }
        expect = trials * exp(logits[draft] / 0.8) / z;
        tap_ok(ok && chi2 < 24.3 && fabs(n_acc - expect) < 5 * sqrt(expect),
               "verifying draft %d keeps the target distribution (chi2 %.2f, "
               "accepted %d, expected %.0f)", draft, chi2, n_acc, expect);
    }

    llm_sampler_free(&s);
    return tap_done();
}
