"""computed.api.quota_rules: limits in force and the over-limit decision."""

from computed.api.quota_rules import Over, limit_of, over


def test_own_limits_win_over_the_defaults():
    own = {"instances": 3, "CUSTOM_GOLD": 1}
    defaults = {"instances": 10, "cores": -1}
    assert limit_of("instances", own, defaults, -1) == 3
    assert limit_of("CUSTOM_GOLD", own, defaults, -1) == 1
    assert limit_of("CUSTOM_SILVER", own, defaults, 5) == 5
    assert limit_of("instances", {}, defaults, 5) == 10
    assert limit_of("cores", {}, defaults, 5) == -1


def test_over_names_resource_limit_and_usage():
    limits = {"instances": 2, "CUSTOM_GOLD": -1}
    assert over(limits, {"instances": 1}, {"instances": 1, "CUSTOM_GOLD": 1}) == []
    found = over(limits, {"instances": 2, "CUSTOM_GOLD": 100}, {"instances": 1,
                                                                "CUSTOM_GOLD": 1})
    assert found == [Over("instances", 2, 2, 1)]
    assert str(found[0]) == ("Quota exceeded for instances: requested 1, but already used 2 "
                             "of 2 instances")
    # After the allocation the build counts itself: used == limit is still within.
    assert over({"CUSTOM_GOLD": 1}, {"CUSTOM_GOLD": 1}, {"CUSTOM_GOLD": 0}) == []
    assert over({"CUSTOM_GOLD": 0}, {}, {"CUSTOM_GOLD": 1}) == [Over("CUSTOM_GOLD", 0, 0, 1)]
