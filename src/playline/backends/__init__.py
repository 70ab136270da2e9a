"""Where attempts run besides the embedded runner: ``playline.backends.temporal``.

Nothing is imported here: a backend's client library is an optional extra, imported only by
the module that needs it.
"""
