"""Sections and options in the config files that nothing registered.

oslo.config ignores them: a typo (``usernme``, ``[placment]``) silently leaves
the option at its default, and the program starts on a configuration the
operator did not write. This module owns finding them. Guarantees: every file
oslo.config read (``--config-file`` and each ``*.conf`` of ``--config-dir``, in
oslo.config's order) is looked at; a section is known when a group of that
name is registered, a key when it is the name of a registered option of its
group or one of that option's deprecated names. The first unknown one is
raised as a ``ConfigError`` naming the section, the option and the file, with
the nearest known name as a hint.

The option lists of the other programs that may share the file
(:data:`OTHER_PROGRAMS`: keystonemiddleware's, oslo.policy's, oslo.middleware's)
are loaded only when the file has a section or option that the program's own
options and lists (:data:`OWN`) do not know: loading them imports those
libraries (keystonemiddleware brings cryptography's Rust extension), 14 MB of a
daemon's RSS that it would keep for its whole life without ever using them. The
verdict is the same as with every list loaded at once: lists only add known
names, so a file that the own lists accept is accepted by all of them, and
otherwise the others are loaded, one at a time, until the file is accepted or
all are loaded and the first fault is raised as it would have been.
"""

from __future__ import annotations

import difflib
import glob
import importlib.metadata
import os
from collections.abc import Collection, Iterable, Iterator

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from computed.conf.errors import ConfigError

#: The ``oslo.config.opts`` namespaces of every computed program that reads the
#: same file (as in etc/computed/computed-config-generator.conf), those not
#: installed skipped: their lists carry the deprecated names, which a registered
#: ``ConfigOpts`` does not show, and the sections a program registers only for
#: itself (keystonemiddleware's [keystone_authtoken] in an API server) are not
#: unknown to the others.
NAMESPACES = ('computed', 'oslo.log', 'oslo.messaging', 'keystonemiddleware.auth_token',
              'oslo.policy', 'oslo.middleware')
#: The namespaces of what every computed program imports anyway: loaded for every check.
OWN = ('computed', 'oslo.log', 'oslo.messaging')
#: The other programs' namespaces, loaded only while something in the files is unknown, the
#: cheaper first (what loading each adds to a daemon's RSS: oslo.policy ~0, oslo.middleware
#: 3.4 MB, keystonemiddleware 10.1 MB).
OTHER_PROGRAMS = ('oslo.policy', 'oslo.middleware', 'keystonemiddleware.auth_token')

DEFAULT = 'DEFAULT'


def _key(name: str) -> str:
    # oslo.config looks options up by dest, where dashes became underscores.
    return name.replace('-', '_')


def _section(name: str) -> str:
    # oslo.config's reading of a section name: DEFAULT as written, others in lower case.
    return name if name == DEFAULT else name.lower()


def _listed_opts(namespaces: Collection[str] = NAMESPACES) -> Iterator[tuple[str, cfg.Opt]]:
    for entry_point in importlib.metadata.entry_points(group='oslo.config.opts'):
        if entry_point.name not in namespaces:
            continue
        for group, opts in entry_point.load()():
            name = DEFAULT if group is None else getattr(group, 'name', group)
            for opt in opts:
                yield name, opt


def known_options(conf: cfg.ConfigOpts, extra: Iterable[tuple[str, cfg.Opt]] = (),
                  namespaces: Collection[str] = NAMESPACES) -> dict[str, set[str]]:
    """``{section: option names}`` a config file may use, for a registered ``conf``.

    ``extra`` are options registered on the fly (an auth plugin's), for their deprecated names;
    ``namespaces`` the option lists read (of :data:`NAMESPACES`). More namespaces never know
    fewer names.
    """
    known: dict[str, set[str]] = {DEFAULT: set()}
    for name in conf:
        value = conf[name]
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            known.setdefault(name, set()).update(_key(option) for option in value)
        else:
            known[DEFAULT].add(_key(name))
    registered = set(known)
    for group, opt in [*_listed_opts(namespaces), *extra]:
        if group not in registered:
            # Another program's section. A registered section keeps to what is registered:
            # [ironic] username without an auth_type is a mistake, though a plugin lists it.
            known.setdefault(group, set()).add(_key(opt.dest))
        for deprecated in opt.deprecated_opts:
            if deprecated.name:
                known.setdefault(deprecated.group or group, set()).add(_key(deprecated.name))
    return known


def config_files(conf: cfg.ConfigOpts) -> list[str]:
    """The files oslo.config read, in its order: the ``--config-file``s, then every
    ``*.conf`` of each ``--config-dir``, sorted."""
    files = list(conf.config_file or ())
    for directory in conf.config_dirs:
        files += sorted(glob.glob(os.path.join(directory, '*.conf')))
    return files


def check(conf: cfg.ConfigOpts, extra: Iterable[tuple[str, cfg.Opt]] = ()) -> None:
    """Raise ``ConfigError`` for the first unknown section or option of the files read.

    The other programs' option lists are loaded only while something is unknown (see the
    module's docstring); the fault raised is the one every list loaded at once would give.
    """
    extra = list(extra)
    files = []
    for path in config_files(conf):
        sections: dict[str, dict[str, list[str]]] = {}
        cfg.ConfigParser(path, sections).parse()
        files.append((path, sections))
    namespaces = list(OWN)
    fault = _first_fault(files, known_options(conf, extra, namespaces), conf)
    for namespace in OTHER_PROGRAMS:
        if fault is None:
            return
        namespaces.append(namespace)
        fault = _first_fault(files, known_options(conf, extra, namespaces), conf)
    if fault is not None:
        raise fault


def _first_fault(files: list[tuple[str, dict[str, dict[str, list[str]]]]],
                 known: dict[str, set[str]], conf: cfg.ConfigOpts) -> ConfigError | None:
    """The first unknown section or option of ``files`` (path, parsed sections) for ``known``;
    None when there is none. A section's unknown auth plugin is raised: more known names
    would find it all the same (the sections before it are known, and stay known)."""
    for path, sections in files:
        for written, options in sections.items():
            section = _section(written)
            if section not in known:
                return ConfigError(None, None, f'config file {path}: unknown section '
                                               f'[{written}]{_hint(section, known, "[{}]")}')
            allowed = known[section] | _plugin_keys(section, options, conf)
            for option in options:
                if _key(option) not in allowed:
                    return ConfigError(section, option, f'unknown option'
                                                        f'{_hint(_key(option), known[section])}'
                                                        f' in {path}')
    return None


def _plugin_keys(section: str, options: dict[str, list[str]], conf: cfg.ConfigOpts) -> set[str]:
    """The options of the auth plugin an unregistered section names in ``auth_type`` (another
    program's section, e.g. keystonemiddleware's [keystone_authtoken]: the middleware registers
    the plugin's options only once it runs). Registered sections get theirs from the loader."""
    if section in conf or not options.get('auth_type'):
        return set()
    try:
        plugin_opts = ks_loading.get_auth_plugin_conf_options(options['auth_type'][-1].strip())
    except ks_exc.NoMatchingPlugin:
        raise ConfigError(section, 'auth_type', f"unknown auth plugin "
                                                f"{options['auth_type'][-1].strip()!r}") from None
    return {_key(opt.dest) for opt in plugin_opts}


def unknown_keys(conf: cfg.ConfigOpts, group: str) -> list[str]:
    """The keys of section ``group`` in the files read that are no option of that group (to
    explain a required option found missing, before :func:`check` can run)."""
    try:
        known = known_options(conf).get(group, set())
        found = []
        for path in config_files(conf):
            sections: dict[str, dict[str, list[str]]] = {}
            cfg.ConfigParser(path, sections).parse()
            for written, options in sections.items():
                if _section(written) == group:
                    found += [key for key in options if _key(key) not in known]
        return found
    except (cfg.Error, OSError, ValueError):
        return []


def _hint(name: str, candidates: Iterable[str], form: str = "'{}'") -> str:
    close = difflib.get_close_matches(name, sorted(candidates), n=1)
    return f' (did you mean {form.format(close[0])}?)' if close else ''
