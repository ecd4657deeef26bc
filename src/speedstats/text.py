"""Text helpers shared by every layer (no framework, Jinja or GitHub imports)."""

import difflib
import re
import reprlib
import unicodedata

from speedstats.casekinds import case_kind

# Terminal escapes: CSI (colours, cursor moves), OSC (titles, hyperlinks; ended by BEL or ST), and
# the other two-character ESC sequences.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]|\x9b[0-?]*[ "
                   r"-/]*[@-~]")
_FENCE = re.compile(r"`{3,}|~{3,}")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_BIDI = dict.fromkeys(map(ord, "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"))


class SafeText(str):
    """Text that may be printed as it is, where it is printed: the project's own words, or text from
    outside already made safe for its place (markdown_safe, fence_safe). The renderer escapes every other
    string it is given (speedstats.render)."""

    __slots__ = ()


def trusted(text):
    """The project's own words (or a value it checked, such as a URL of its own run), marked as text
    the renderer prints as it is."""
    return SafeText(text)


def one_line(text, limit):
    """The text with its whitespace collapsed to single spaces, cut to `limit` characters."""
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "\u2026"
    return text


def shown(value, limit=60):
    """repr() of a value from outside for an error message, at most `limit` characters, in time and
    memory bounded whatever the value holds (a long string, a deep or aliased structure)."""
    bounded = reprlib.Repr()
    bounded.maxlevel, bounded.maxstring, bounded.maxother, bounded.maxlong = 3, limit, limit, limit
    bounded.maxlist = bounded.maxtuple = bounded.maxdict = bounded.maxset = bounded.maxfrozenset = 4
    return one_line(bounded.repr(value), limit)


def close_match(word, choices):
    """The choice closest to a misspelt word (difflib's ratio, at least 0.6 as get_close_matches
    asks), the first in sorted order among equally close ones; None when none is close."""
    word, best = str(word)[:100], None
    for choice in sorted({str(c) for c in choices}):
        ratio = difflib.SequenceMatcher(None, choice, word).ratio()
        if ratio >= 0.6 and (best is None or ratio > best[0]):
            best = (ratio, choice)
    return best[1] if best else None


def did_you_mean(word, choices, prefix=""):
    """' (did you mean X?)' for the choice closest to word, or '' when none is close."""
    found = close_match(word, choices)
    return f" (did you mean {prefix}{found}?)" if found is not None else ""


def fence_safe(text, limit):
    """Text from outside (a results file, a bundle, a worker's error) made safe inside the comment's
    code fence: terminal escapes and control characters gone, on one line, no run of three backticks
    or tildes that could close the fence, no `<` that could start an HTML tag such as `</details>`.
    Ordinary text passes unchanged."""
    text = _ANSI.sub("", str(text)).translate(_BIDI)
    text = "".join(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in text)
    text = _FENCE.sub(lambda m: "\u02cb" * len(m.group()) if m.group()[0] == "`"
                      else "\u02dc" * len(m.group()), text)
    text = _TAG_START.sub("\u2039", text)
    return SafeText(one_line(text, limit))


# Enough to keep links, images, code, table cells and character references (&#64; is an @ to GitHub's
# mention filter) from forming; emphasis is left alone.
_MARKDOWN_ACTIVE = re.compile(r"([\\`\[\]|&])")
# Where GitHub would turn a bare URL into a link: http:// and https://, and www.
_AUTOLINK = re.compile(r"(?i)(?<=https:/)(?=/)|(?<=http:/)(?=/)|(?<=\bwww)(?=\.)")


def markdown_safe(text, limit):
    """Text from outside made harmless in markdown (after the code fence): what fence_safe does, with
    brackets, backticks and pipes escaped (no link, image, code or extra table cell), no @mention and
    no bare URL that GitHub would link (a word joiner after each @, between the slashes of ://, and
    after www)."""
    text = _MARKDOWN_ACTIVE.sub(r"\\\1", fence_safe(text, limit)).replace("@", "@\u2060")
    return SafeText(_AUTOLINK.sub("\u2060", text))


def time_text(seconds, kind):
    """A time as the Speed stats block prints it, in the unit of its case kind (speedstats.casekinds)."""
    if seconds is None:
        return ""
    return case_kind(kind).time_text(seconds)


def change_percent(fraction):
    """A change (0.05 for +5 %) in percent, with one that prints as 0.0 made +0.0 rather than -0.0."""
    if fraction is None:
        return None
    value = fraction * 100
    return value if round(value, 1) != 0 else 0.0
