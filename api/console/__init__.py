"""`mlog console`: a read-only web console over the history (docs/console.md).

One module per concern: `errors` (what a bad request says), `source` (the `Metadata` handle a
session reads through, on a worker thread), `login` (a user and password checked by SCRAM
against the service, as a client would), `sessions` (cookies, expiry, CSRF tokens),
`timeline` (the audit log's rows, filters and pages), `changes` (a record as the words of
what it changed, before -> after), `travel` (the cluster at a point, and the diff of two),
`entity` (an entity's history), `exports` (the timeline's rows as CSV and JSON), `health`
(the quorum, brokers and the log's digest; a kept digest checked), `live` (the long polls
the live pages follow the log with), `views` (the pages), `state` (what the handlers share),
`app` (the aiohttp application: routes, middlewares, headers) and `serve` (listening, TLS).
Templates, the stylesheet and the one small script (`static/live.js`) are in the package;
nothing from another host is needed, and every page works without the script.
"""
