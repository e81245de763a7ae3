"""Credentials in URLs: a base URL may carry ``user:password@`` (a proxy, a gateway, a
token as the user name). They are secrets like API keys: every URL shown or written goes
through ``public_url``, and ``url_secrets`` feeds the artifact redaction as a last guard.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit


def public_url(url: str) -> str:
    """``url`` without its ``user:password@`` part, fit for messages and artifacts; a
    string that is not a URL comes back unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The secret parts of ``url``'s credentials, as written and percent-decoded: the
    password, or the user name when it stands alone (a token). A user name next to a
    password is not secret (it could be a word like ``user``, and redacting it would
    mangle every artifact that holds that word)."""
    if not url:
        return ()
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return ()
    if "@" not in netloc:
        return ()
    userinfo = netloc.rpartition("@")[0]
    user, colon, password = userinfo.partition(":")
    secret = password if colon else user
    return tuple(dict.fromkeys(v for v in (secret, unquote(secret)) if v))
