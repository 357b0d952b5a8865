"""Tests that start processes: what only a fresh process shows, signals sent to a real process,
and other programs (promtool, systemd-analyze, shellcheck and bash for devstack, the
OpenStack client, the repository's tools). Nothing here needs the services of computed.testing
(that is tests/functional). The unit tier (tests/unit) starts none: it imports and calls."""
