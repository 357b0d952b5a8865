"""Console scripts of computed; importing this package monkey-patches.

The one place eventlet enters the process: oslo.messaging and oslo.service
expect a green world, and the patching must happen before any other module
imports socket, threading or time, hence here, in the package every console
script is imported through. Library code under ``computed`` never imports
eventlet.
"""

import warnings

with warnings.catch_warnings():
    # eventlet announces its own deprecation on stderr at import; the scripts
    # promise one line on stderr for a bad configuration, nothing more.
    warnings.simplefilter('ignore')
    import eventlet

    eventlet.monkey_patch()
