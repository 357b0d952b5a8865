"""computed's compute API: a bare-metal subset of the OpenStack Compute API v2.1.

One module per concern: :mod:`.app` (the WSGI application: middleware and routes),
:mod:`.wsgi` (the module uwsgi or mod_wsgi load), :mod:`.auth` (keystone or noauth2),
:mod:`.microversion`, :mod:`.errors` (the Compute API's error bodies), :mod:`.schemas`
(request bodies), :mod:`.policy` (oslo.policy defaults), :mod:`.backends` (the services the
API talks to), and one module per resource: :mod:`.versions`, :mod:`.flavors`,
:mod:`.servers`, :mod:`.quotas` (with ``/limits``), :mod:`.services`. docs/api.md says what is
supported, by microversion.
"""
