#!/usr/bin/python3
"""Random Jinja templates for differential testing against jinja2.

generate(seed, n) returns n (template, variables) pairs built from a small
grammar: statements (if/elif/else, for/else with filters and loop
controls, set, namespaces, macros, set blocks, filter blocks, whitespace
control) around expressions (literals, variables, attribute and item
access, slices, method calls, filters, tests, operators, conditional
expressions).  Many of them raise in jinja2; those must raise in ours too.

t/templates.t renders a fixed-seed batch with both renderers.  For longer
hunts during development:

    t/templates/randtemplates.py SEED COUNT     (prints the mismatches)
"""
import json
import os
import random
import subprocess
import sys
import tempfile

VARS = {
    "messages": [{"role": "system", "content": " Sys "}, {"role": "user", "content": "Hi é"},
                 {"role": "assistant", "content": None,
                  "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
                 {"role": "tool", "content": "{\"x\": 1}"}],
    "n": 3, "f": 2.5, "s": "Hello World", "e": "", "l": [3, 1, 2],
    "d": {"b": 1, "a": [1, 2], "c": None}, "t": True, "z": 0, "u": "ünï",
    "nested": {"x": {"y": "deep"}},
}
NAMES = [k for k in VARS if k != "messages"] + ["messages", "undef", "loop", "ns"]
STRS = ["'a'", "'xyz'", "''", "'A b'", "'é'", "'\\n'", "' p '", "'user'", "'<t>'"]
FILTERS = ["upper", "lower", "trim", "length", "string", "first", "last", "list", "tojson",
           "capitalize", "title", "int", "float", "abs", "reverse", "unique", "sort", "items",
           "dictsort", "safe", "wordcount", "sum", "min", "max", "e", "count", "default",
           "join(', ')", "default('D')", "default('D', true)", "replace('l', 'L')", "indent(2)",
           "map('string')", "select", "reject", "selectattr('role')", "map(attribute='role')",
           "tojson(indent=2)", "trim('H')", "batch(2)", "center(9)", "truncate(5)", "round(1)",
           "int(7)", "selectattr('role', 'equalto', 'user')", "rejectattr('content')", "join",
           "sort(reverse=true)", "groupby('role')", "format(1)", "attr('role')",
           "tojson(sort_keys=true)", "slice(2)"]
TESTS = ["defined", "undefined", "none", "string", "number", "mapping", "sequence", "iterable",
         "boolean", "integer", "float", "odd", "even", "true", "false", "lower", "upper",
         "callable", "in [1, 'a']", "divisibleby 2", "eq 3", "sameas none", "escaped"]
METHODS = ["upper()", "lower()", "strip()", "split()", "split(',')", "startswith('H')",
           "endswith('d')", "replace('o', '0')", "get('a')", "get('q', 1)", "items()", "keys()",
           "values()", "title()", "lstrip()", "rstrip('d')", "find('o')", "count('l')",
           "join(['1', '2'])", "format(1, 'x')", "isdigit()", "capitalize()", "rsplit(' ', 1)",
           "pop()", "splitlines()", "zfill(8)", "center(9, '*')", "copy()", "index(1)"]
OPS = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "and", "or", "in",
       "not in", "**"]


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def atom(self, d):
        r = self.r.random()
        if r < 0.3:
            return self.r.choice(NAMES)
        if r < 0.45:
            return self.r.choice(STRS)
        if r < 0.6:
            return self.r.choice(["0", "1", "2", "-1", "3.5", "0.0", "1e3", "true", "false", "none"])
        if r < 0.7 and d < 3:
            return "[" + ", ".join(self.expr(d + 1) for _ in range(self.r.randint(0, 3))) + "]"
        if r < 0.75 and d < 3:
            return "{" + ", ".join("%s: %s" % (self.r.choice(STRS), self.expr(d + 1))
                                   for _ in range(self.r.randint(0, 2))) + "}"
        if r < 0.8 and d < 3:
            return "(" + self.expr(d + 1) + ")"
        if r < 0.85:
            return self.r.choice(["range(%d)" % self.r.randint(0, 4), "namespace(a=1)",
                                  "dict(k=2)", "cycler(1,2)"])
        return self.r.choice(NAMES)

    def postfix(self, e):
        for _ in range(self.r.randint(0, 2)):
            r = self.r.random()
            if r < 0.3:
                e = "%s.%s" % (e, self.r.choice(["role", "content", "a", "b", "x", "y", "index",
                                                 "length", "first", "0", "items"]))
            elif r < 0.5:
                e = "%s[%s]" % (e, self.r.choice(["0", "-1", "'a'", "'role'", "1:", "::-1", ":2",
                                                  "'x'"]))
            elif r < 0.7:
                e = "%s.%s" % (e, self.r.choice(METHODS))
            elif r < 0.9:
                e = "(%s|%s)" % (e, self.r.choice(FILTERS))
            else:
                e = "(%s is %s%s)" % (e, self.r.choice(["", "not "]), self.r.choice(TESTS))
        return e

    def expr(self, d=0):
        e = self.postfix(self.atom(d))
        r = self.r.random()
        if d < 3 and r < 0.3:
            e = "%s %s %s" % (e, self.r.choice(OPS), self.expr(d + 1))
        elif d < 3 and r < 0.35:
            e = "%s if %s else %s" % (e, self.expr(d + 1), self.expr(d + 1))
        elif d < 3 and r < 0.38:
            e = "not " + e
        elif d < 3 and r < 0.4:
            e = "-" + e
        return e

    def stmt(self, d=0, in_loop=False):
        r = self.r.random()
        ws = lambda: self.r.choice(["", "-", ""])  # noqa: E731
        if r < 0.3 or d > 2:
            return self.r.choice(["x", " ", "\n", "  a\n", "\t", "é", "{{ %s }}" % self.expr(),
                                  "{{- %s -}}" % self.expr(), "{#c#}", "\n  "])
        if r < 0.45:
            return "{%%%s if (%s) %s%%}%s{%% elif (%s) %%}%s{%% else %%}%s{%%%s endif %%}" % (
                ws(), self.expr(), ws(), self.body(d + 1, in_loop), self.expr(),
                self.body(d + 1, in_loop), self.body(d + 1, in_loop), ws())
        if r < 0.6:
            return "{%% for %s in (%s)%s %%}%s{%% else %%}%s{%% endfor %%}" % (
                self.r.choice(["x", "k, v", "m"]), self.expr(),
                self.r.choice(["", " if x", " if loop is defined"]),
                self.body(d + 1, True), self.body(d + 1, in_loop))
        if r < 0.72:
            return "{%% set %s = %s %%}" % (self.r.choice(["x", "y", "s", "n", "ns.a", "k, v"]),
                                            self.expr())
        if r < 0.76:
            return "{%% set ns = namespace(a=%s) %%}" % self.expr()
        if r < 0.8:
            return "{%% macro mm(a, b=%s) %%}%s{%% endmacro %%}{{ mm(%s) }}" % (
                self.expr(), self.body(d + 1, False), self.expr())
        if r < 0.83 and in_loop:
            return self.r.choice(["{% break %}", "{% continue %}"])
        if r < 0.86:
            return "{%% set x %%}%s{%% endset %%}" % self.body(d + 1, in_loop)
        if r < 0.88:
            return "{%% filter %s %%}%s{%% endfilter %%}" % (
                self.r.choice(["upper", "trim", "replace('a','b')"]), self.body(d + 1, in_loop))
        if r < 0.9:
            return "\n    {%% if (%s) %%}\n    X\n    {%% endif %%}\n" % self.expr()
        return "{{ %s }}" % self.expr()

    def body(self, d, in_loop):
        return "".join(self.stmt(d, in_loop) for _ in range(self.r.randint(0, 3)))


def generate(seed, n):
    g = Gen(seed)
    return [(g.body(0, False), json.loads(json.dumps(VARS))) for _ in range(n)]


def nondeterministic(text):
    """Python prints some objects with their memory address."""
    return " at 0x" in text.lower()


def main(argv):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import render_ref
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    llm = os.environ.get("LLM_BIN", os.path.join(root, "build", "llm"))
    seed, count = int(argv[0]), int(argv[1])
    os.environ.setdefault("LLM_TEMPLATE_DATE", "2024-07-26")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (src, variables) in enumerate(generate(seed, count)):
            messages = variables.pop("messages")
            ref = render_ref.render(src, json.loads(json.dumps(messages)), None, None, False,
                                    {}, json.loads(json.dumps(variables)))
            with open(os.path.join(tmp, "chat_template.jinja"), "w", encoding="utf-8") as f:
                f.write(src)
            with open(os.path.join(tmp, "m.json"), "w", encoding="utf-8") as f:
                json.dump(messages, f)
            p = subprocess.run([llm, "template", "--model", tmp, "--messages",
                                os.path.join(tmp, "m.json"), "--kwargs", json.dumps(variables)],
                               capture_output=True)
            ours = ("ok", p.stdout.decode("utf-8", "replace")) if p.returncode == 0 else \
                ("error", p.stderr.decode("utf-8", "replace").strip())
            same = (ref[0] == "ok") == (ours[0] == "ok") and (
                ref[0] != "ok" or ref[1] == ours[1] or nondeterministic(ref[1]))
            if not same:
                bad += 1
                print("template %d: %r\n  jinja2: %s %r\n  ours:   %s %r" % (
                    i, src, ref[0], ref[1][:300], ours[0], ours[1][:300]))
    print("%d templates, %d mismatches" % (count, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
