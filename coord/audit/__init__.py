"""`coord audit`: a PySpark job that checks an exported history kept coord's promises.

`spark` (the session: `local[*]` or any master), `load` (a history directory's committed
files as a DataFrame), `checks/` (one module per family of promises, each a function
from the history to a DataFrame of violations with the rows that show them), `stats`
(ownership and leadership figures), `report` (HTML, PNG plots, JSON summary), `job`
(runs it all). It reads coord only through exported files; the driver collects
aggregates and violations, never the history.
"""
