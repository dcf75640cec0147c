#!/usr/bin/python3
"""Reference chat-template renderer: Python jinja2 set up the way Hugging Face
transformers sets it up in apply_chat_template():

  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
      extensions=[<generation tag>, jinja2.ext.loopcontrols])
  filters["tojson"]  = json.dumps(x, ensure_ascii=False, indent=None,
                                  separators=None, sort_keys=False)
  globals["raise_exception"], globals["strftime_now"]

The {% generation %} tag is transformers' AssistantTracker with mask tracking
off (it renders its body through a caller, nothing else).  strftime_now() is
pinned to LLM_TEMPLATE_DATE (default 2024-07-26), the same variable our C
renderer reads, so both sides print the same date.

Used as a module by t/templates.t, or from the command line:
  render_ref.py --template FILE --messages FILE [--tools FILE]
      [--add-generation-prompt] [--kwargs JSON] [--bos S] [--eos S]
"""
import json
import os
import sys
import warnings
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


# jinja2 compiles templates to Python; odd constant expressions make Python
# print SyntaxWarnings ("'int' object is not subscriptable") on stderr.
warnings.filterwarnings("ignore", category=SyntaxWarning)


class GenerationTag(Extension):
    """transformers' AssistantTracker without assistant-mask tracking."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation"), [], [], body).set_lineno(lineno)

    def _generation(self, caller):
        return caller()


def pinned_date():
    text = os.environ.get("LLM_TEMPLATE_DATE", "2024-07-26")
    fmt = "%Y-%m-%d %H:%M:%S" if " " in text else "%Y-%m-%d"
    return datetime.strptime(text, fmt)


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    moment = pinned_date()

    def strftime_now(fmt):
        return moment.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


_env = None
_compiled = {}


def render(src, messages, tools=None, documents=None, add_generation_prompt=False,
           special_tokens=None, kwargs=None):
    """Returns ("ok", text), ("syntax", message) when the template does not
    compile, or ("error", message) when rendering raises."""
    global _env
    if _env is None:
        _env = make_env()
    if src not in _compiled:
        try:
            _compiled[src] = ("ok", _env.from_string(src))
        except Exception as e:  # TemplateSyntaxError, TemplateAssertionError, SyntaxError
            _compiled[src] = ("syntax", "%s: %s" % (type(e).__name__, e))
    kind, tpl = _compiled[src]
    if kind != "ok":
        return kind, tpl
    variables = dict(special_tokens or {})
    variables.update(kwargs or {})
    try:
        text = tpl.render(messages=messages, tools=tools, documents=documents,
                          add_generation_prompt=add_generation_prompt, **variables)
    except Exception as e:
        return "error", "%s: %s" % (type(e).__name__, e)
    return "ok", text


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--template", required=True)
    ap.add_argument("--messages", required=True)
    ap.add_argument("--tools")
    ap.add_argument("--add-generation-prompt", action="store_true")
    ap.add_argument("--kwargs")
    ap.add_argument("--bos")
    ap.add_argument("--eos")
    a = ap.parse_args(argv)
    special = {}
    if a.bos is not None:
        special["bos_token"] = a.bos
    if a.eos is not None:
        special["eos_token"] = a.eos
    with open(a.template, encoding="utf-8") as f:
        src = f.read()
    with open(a.messages, encoding="utf-8") as f:
        messages = json.load(f)
    tools = None
    if a.tools:
        with open(a.tools, encoding="utf-8") as f:
            tools = json.load(f)
    kind, text = render(src, messages, tools, None, a.add_generation_prompt, special,
                        json.loads(a.kwargs) if a.kwargs else None)
    if kind != "ok":
        sys.stderr.write(text + "\n")
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
