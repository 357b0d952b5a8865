#!/bin/bash
# plugin.sh - devstack plugin for computed: active-active compute daemons for Ironic.
# The phases follow https://docs.openstack.org/devstack/latest/plugins.html; the work is in
# lib/computed.

# shellcheck source=devstack/lib/computed
source "$COMPUTED_DIR/devstack/lib/computed"

if is_service_enabled computed computed-reporter computed-zookeeper computed-api; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Installing computed"
        install_computed
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        # After ironic's post-config (it is enabled first) and before ironic starts (extra).
        echo_summary "Configuring computed"
        configure_computed
        init_computed
    elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
        # Ironic runs by now; the daemons list its nodes as they start.
        echo_summary "Starting computed"
        start_computed
    fi

    if [[ "$1" == "unstack" ]]; then
        stop_computed
    fi

    if [[ "$1" == "clean" ]]; then
        cleanup_computed
    fi
fi
