# shellcheck shell=bash
# Stand-ins for the devstack functions the computed plugin calls. Each records its call, shell-
# quoted, as one line of $STUB_LOG; the test replays them (iniset calls become the config file).
# Services are enabled by $STUB_ENABLED (space separated), as local.conf's enable_service would.

function _record {
    local line
    printf -v line '%q ' "$@"
    echo "${line% }" >> "$STUB_LOG"
}

function define_plugin { _record define_plugin "$@"; }
function plugin_requires { _record plugin_requires "$@"; }
function echo_summary { :; }
function get_python_exec_prefix { echo "$STUB_BIN"; }
function trueorfalse {
    local default=$1 name=$2
    local value=${!name:-$default}
    case "${value,,}" in 1|yes|true|on) echo True ;; *) echo False ;; esac
}
function is_service_enabled {
    local service
    for service in "$@"; do
        [[ " $STUB_ENABLED " == *" $service "* ]] && return 0
    done
    return 1
}
function setup_develop { _record setup_develop "$@"; }
function install_package { _record install_package "$@"; }
function iniset { _record iniset "$@"; }
function database_connection_url {
    echo "$DATABASE_TYPE+pymysql://$DATABASE_USER:$DATABASE_PASSWORD@$DATABASE_HOST/$1?charset=utf8"
}
function recreate_database { _record recreate_database "$@"; }
function create_service_user { _record create_service_user "$@"; }
function get_or_add_user_project_role { _record get_or_add_user_project_role "$@"; }
function configure_keystone_authtoken_middleware {
    _record configure_keystone_authtoken_middleware "$@"
}
function get_or_create_service { _record get_or_create_service "$@"; echo service-id; }
function get_or_create_endpoint { _record get_or_create_endpoint "$@"; echo endpoint-id; }
function run_process { _record run_process "$@"; }
function stop_process { _record stop_process "$@"; }
# Not run: these would need root or change the machine.
function sudo { _record sudo "$@"; }
function die { _record die "$@"; exit 1; }
# The health and ZooKeeper waits: recorded, and answered as a healthy service would.
function timeout {
    _record timeout "$@"
    if [[ "$*" == *ruok* ]]; then
        echo imok
    fi
}
