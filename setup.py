"""computed's packages; the rest of the metadata is in setup.cfg.

drivers/ironic/ installs as the top-level package ``computed_ironic``: a package called
``drivers`` in users' site-packages would collide with any other project's.
"""

import setuptools

setuptools.setup(
    packages=setuptools.find_packages(include=['computed', 'computed.*', 'hashring',
                                               'hashring.*']) + ['computed_ironic'],
    package_dir={'computed_ironic': 'drivers/ironic'},
)
