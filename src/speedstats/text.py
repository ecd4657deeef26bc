"""Text helpers shared by every layer (no framework, Jinja or GitHub imports)."""


def one_line(text, limit):
    """The text with its whitespace collapsed to single spaces, cut to `limit` characters."""
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "\u2026"
    return text
