"""Checks on the serving model's results before they are reported: the physics invariants (ceilings and floors a
result must respect, :mod:`.physics`, and PrfaaS's, :mod:`.prfaas`) and the warnings a report carries about the
model's own fidelity (:mod:`.decode_law`, :mod:`.vendors`)."""
