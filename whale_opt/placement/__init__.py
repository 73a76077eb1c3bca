"""The engine every solver shares: cluster occupancy, list scheduling, records,
reasons, preemption search and order search. Imports no policy or solver."""
