"""OpenStack Placement: the resource providers computed reports (:mod:`.client`), the
instances' allocations (:mod:`.allocations`), both through one HTTP layer (:mod:`.http`)."""
