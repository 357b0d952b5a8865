"""OpenStack Placement: the HTTP client computed writes providers through."""
