"""The few JavaScript string semantics the prompt builders must reproduce exactly."""

from __future__ import annotations

__all__ = ["JS_WHITESPACE", "js_trim", "js_trim_end", "js_trim_start"]

#: What ``String.prototype.trim`` removes (WhiteSpace and LineTerminator of ECMAScript); unlike
#: ``str.strip`` it keeps the ASCII separators U+001C..U+001F and U+0085.
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(text: str) -> str:
    return text.strip(JS_WHITESPACE)


def js_trim_start(text: str) -> str:
    return text.lstrip(JS_WHITESPACE)


def js_trim_end(text: str) -> str:
    return text.rstrip(JS_WHITESPACE)
