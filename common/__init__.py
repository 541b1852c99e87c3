"""Building blocks shared by ``harness``, ``methods`` and ``tasks`` that belong to none of them
(so that neither of the lower packages imports upwards from ``harness``)."""
