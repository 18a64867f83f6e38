"""The driver engine the concurrent backends share: driver operators as pull-driven streams.

The rx and Ray backends differ in where actor calls run (a thread per actor, a Ray actor)
and how the driver waits for them (a condition, ``ray.wait``); that is their ``Runtime``.
Everything the driver does with the results — barrier rounds, gather's completion order,
pipelined calls, broadcasts, zip, unions, split, readiness — is written once, here, and
lowered by the same table entries on both backends (``engine.lowering.DRIVER``).

One driver thread pulls the root and does all of it: it makes every request to an actor, in
the order the reference interpreter would, so each actor sees its calls in an order a trace
replays, even when async branches share actors. A pull waits only for work it has itself
submitted; an async union never waits on one input while another can deliver.
"""
