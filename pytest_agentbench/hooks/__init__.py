"""The pluggy hooks third-party plugins implement (``hookspecs``), the built-in
implementations registered through them (``builtins``), and how plugins are called
(``plugin_hooks``)."""
