"""Requirement cases for Nova's extra-spec operators: (host value, requirement, Nova's answer).

Shared by the unit tests (computed's implementation) and the Nova comparison test, which runs
the same cases through Nova's own ``extra_specs_ops.match`` and expects the same answers.
Only cases where Nova answers (does not raise) are here; the two deliberate differences are
tested on their own.
"""

CASES = [
    # no operator: the whole string, exactly
    ('uefi', 'uefi', True),
    ('uefi', 'bios', False),
    ('uefi', ' uefi', False),
    ('a b', 'a b', True),
    (None, 'uefi', False),
    # '=' is "at least" on numbers
    ('4', '= 4', True),
    ('5', '= 4', True),
    ('3', '= 4', False),
    ('4.0', '= 4', True),
    # '==', '!=', '>=', '<=' on numbers
    ('4', '== 4.0', True),
    ('4', '== 5', False),
    ('4', '!= 5', True),
    ('4', '!= 4', False),
    ('10', '>= 9', True),  # numbers, not strings: '10' < '9' as strings
    ('8', '>= 9', False),
    ('8', '<= 9', True),
    ('10', '<= 9', False),
    # string comparisons
    ('uefi', 's== uefi', True),
    ('uefi', 's== bios', False),
    ('uefi', 's!= bios', True),
    ('uefi', 's!= uefi', False),
    ('10', 's>= 9', False),  # strings: '10' < '9'
    ('b', 's>= b', True),
    ('c', 's> b', True),
    ('b', 's> b', False),
    ('a', 's<= b', True),
    ('c', 's<= b', False),
    ('a', 's< b', True),
    ('b', 's< b', False),
    ('a b', 's== a b', False),  # only the first argument is read
    ('a', 's== a b', True),
    # substrings
    ('avx2,aes,sse4', '<in> aes', True),
    ('avx2,sse4', '<in> aes', False),
    ('avx2,aes,sse4', '<all-in> aes avx2', True),
    ('avx2,sse4', '<all-in> aes avx2', False),
    # alternatives
    ('bios', '<or> uefi <or> bios', True),
    ('uefi', '<or> uefi <or> bios', True),
    ('pxe', '<or> uefi <or> bios', False),
    ('<or>', '<or> uefi <or> bios', False),  # the keywords are not alternatives
    ('uefi', '<or> uefi', True),
    # an operator with no argument never passes
    ('4', '>=', False),
    ('x', '<in>', False),
    ('x', 's==', False),
    # a missing value fails every operator
    (None, '>= 1', False),
    (None, '<in> a', False),
    (None, '<or> a <or> b', False),
]
