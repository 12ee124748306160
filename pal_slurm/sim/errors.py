"""The simulators' own failure: a run that cannot finish (a guard tripped), never a hang."""


class SimulationError(RuntimeError):
    """A run stopped by a guard (too many rounds or events, a non-finite time, a stuck job).

    palctl reports it as one line; tests assert on it. It subclasses RuntimeError so callers that
    caught the guards' RuntimeError before keep working.
    """
