"""Console scripts of computed; importing this package monkey-patches.

The one place eventlet enters the process: oslo.messaging and oslo.service
expect a green world, and the patching must happen before any other module
imports socket, threading or time, hence here, in the package every console
script is imported through. Library code under ``computed`` never imports
eventlet.
"""

import warnings

with warnings.catch_warnings():
    # eventlet announces its own deprecation (EventletDeprecationWarning, a
    # six-line text) on stderr at import, so every command printed it; the
    # scripts promise one line on stderr for a bad configuration, nothing
    # more. Only that warning is silenced (by its text: the class cannot be
    # named before the import), and only around this import, which is the one
    # that runs eventlet/__init__: any other warning still shows.
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
    import eventlet

    eventlet.monkey_patch()
