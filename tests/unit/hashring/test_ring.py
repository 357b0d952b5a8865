"""Unit tests for hashring.ring: the edge cases of the tooz-like surface."""

import unittest

from hashring import EmptyRing, HashRing, UnknownNode

SMALL = 64  # partitions for tests that only exercise the API


class TestErrors(unittest.TestCase):

    def test_empty_ring_lookups_raise(self):
        ring = HashRing([])
        for call in (lambda: ring.get_nodes(b"k"), lambda: ring.owner("k"),
                     lambda: ring.assign(["k"]), ring.shares):
            with self.assertRaises(EmptyRing) as ctx:
                call()
            self.assertIn("no members", str(ctx.exception))
            self.assertIsInstance(ctx.exception, LookupError)

    def test_ring_emptied_by_removal_raises(self):
        ring = HashRing(["a"], partitions=SMALL)
        ring.remove_node("a")
        with self.assertRaises(EmptyRing):
            ring.get_nodes("k")

    def test_remove_unknown_member(self):
        ring = HashRing(["a"], partitions=SMALL)
        with self.assertRaises(UnknownNode) as ctx:
            ring.remove_node("b")
        self.assertEqual("b", ctx.exception.member)
        self.assertEqual("b", ctx.exception.node)
        self.assertIsInstance(ctx.exception, LookupError)

    def test_remove_nodes_is_all_or_nothing(self):
        ring = HashRing(["a", "b"], partitions=SMALL)
        with self.assertRaises(UnknownNode):
            ring.remove_nodes(["a", "zz"])
        self.assertEqual({"a": 1, "b": 1}, dict(ring.nodes))

    def test_empty_keys_rejected(self):
        ring = HashRing(["a"], partitions=SMALL)
        for key in ("", b""):
            with self.assertRaisesRegex(ValueError, "key must not be empty"):
                ring.get_nodes(key)
            with self.assertRaisesRegex(ValueError, "key must not be empty"):
                ring.assign(["ok", key])

    def test_non_string_key_rejected(self):
        ring = HashRing(["a"], partitions=SMALL)
        with self.assertRaises(TypeError):
            ring.get_nodes(42)

    def test_bad_members(self):
        for members in ([""], [b""], [None], [3]):
            with self.assertRaises((ValueError, TypeError)):
                HashRing(members, partitions=SMALL)

    def test_str_and_bytes_alias_refused(self):
        ring = HashRing(["a"], partitions=SMALL)
        with self.assertRaisesRegex(ValueError, "same bytes"):
            ring.add_node(b"a")

    def test_bad_weights(self):
        ring = HashRing([], partitions=SMALL)
        for weight in (0, -1, 1.5, True, "2"):
            with self.assertRaises(ValueError):
                ring.add_node("a", weight=weight)
        self.assertEqual({}, dict(ring.nodes))

    def test_bad_partitions_and_hash(self):
        with self.assertRaises(ValueError):
            HashRing(["a"], partitions=0)
        with self.assertRaisesRegex(ValueError, "not supported"):
            HashRing(["a"], hash_function="no-such-hash")
        with self.assertRaises(ValueError):
            HashRing(["a"], hash_function="shake_128")

    def test_negative_replicas(self):
        ring = HashRing(["a"], partitions=SMALL)
        with self.assertRaises(ValueError):
            ring.get_nodes("k", replicas=-1)


class TestMembership(unittest.TestCase):

    def test_adding_existing_member_updates_weight(self):
        ring = HashRing(["a", "b"], partitions=SMALL)
        ring.add_node("a", weight=3)
        self.assertEqual({"a": 3, "b": 1}, dict(ring.nodes))
        self.assertEqual(4 * SMALL, len(ring))

    def test_nodes_is_read_only(self):
        ring = HashRing(["a"], partitions=SMALL)
        with self.assertRaises(TypeError):
            ring.nodes["b"] = 1

    def test_members_kept_as_given(self):
        ring = HashRing([b"x", "y"], partitions=SMALL)
        self.assertEqual({b"x", "y"}, set(ring.nodes))
        owners = set(ring.assign(f"k{i}" for i in range(200)).values())
        self.assertEqual({b"x", "y"}, owners)

    def test_names_are_not_normalised(self):
        ring = HashRing(["Host-1", "host-1"], partitions=SMALL)
        self.assertEqual(2, len(ring.nodes))


class TestLookups(unittest.TestCase):

    def setUp(self):
        self.ring = HashRing(["a", "b", "c", "d"], partitions=SMALL)

    def test_str_and_bytes_keys_agree(self):
        for i in range(50):
            key = f"node-{i}"
            self.assertEqual(self.ring.get_nodes(key),
                             self.ring.get_nodes(key.encode()))

    def test_getitem_and_owner_match_get_nodes(self):
        for i in range(50):
            key = f"node-{i}".encode()
            self.assertEqual({self.ring.owner(key)}, self.ring.get_nodes(key))
            self.assertEqual(self.ring[key], self.ring.get_nodes(key))

    def test_replicas(self):
        self.assertEqual(set(), self.ring.get_nodes("k", replicas=0))
        self.assertEqual(3, len(self.ring.get_nodes("k", replicas=3)))
        self.assertEqual({"a", "b", "c", "d"},
                         self.ring.get_nodes("k", replicas=10))
        first = self.ring.get_nodes("k")
        self.assertLessEqual(first, self.ring.get_nodes("k", replicas=2))

    def test_ignoring_everyone_gives_empty_set(self):
        self.assertEqual(set(), self.ring.get_nodes(
            "k", ignore_nodes=["a", "b", "c", "d"]))

    def test_ignoring_unknown_members_is_harmless(self):
        self.assertEqual(self.ring.get_nodes("k"),
                         self.ring.get_nodes("k", ignore_nodes=["zz"]))

    def test_assign_keeps_keys_as_given(self):
        keys = ["a1", b"b2"]
        self.assertEqual(set(keys), set(self.ring.assign(keys)))

    def test_shares_sum_to_one(self):
        self.assertAlmostEqual(1.0, sum(self.ring.shares().values()))

    def test_hash_function_is_honoured(self):
        other = HashRing(["a", "b", "c", "d"], partitions=SMALL,
                         hash_function="md5")
        keys = [f"node-{i}" for i in range(200)]
        self.assertNotEqual(self.ring.assign(keys), other.assign(keys))


class TestDeterminism(unittest.TestCase):
    # Known answers: if these change, every deployed daemon would disagree
    # with upgraded ones during a rolling upgrade.  Change only on purpose.
    KNOWN = {
        "0b1f1c5e-2a8e-4d7e-9a51-0f6f3c1d2e11": "compute-6",
        "7d0c5b6a-9f4e-4c3b-8a2d-1e0f9c8b7a65": "compute-0",
        "f00dbabe-0000-4000-8000-000000000001": "compute-2",
        "node-1": "compute-5",
        "node-2": "compute-2",
        "node-3": "compute-0",
    }

    def _ring(self):
        return HashRing([f"compute-{i}" for i in range(7)])

    def test_known_answers(self):
        ring = self._ring()
        for key, member in self.KNOWN.items():
            self.assertEqual({member}, ring.get_nodes(key.encode()))

    def test_insertion_order_is_irrelevant(self):
        members = [f"compute-{i}" for i in range(7)]
        forward = HashRing(members, partitions=SMALL)
        backward = HashRing([], partitions=SMALL)
        for member in reversed(members):
            backward.add_node(member)
        keys = [f"node-{i}" for i in range(500)]
        self.assertEqual(forward.assign(keys), backward.assign(keys))
