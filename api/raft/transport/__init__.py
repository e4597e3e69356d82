"""The controller quorum's transport: wire codec, links to the other voters, endpoint.

The endpoint hands the quorum requests a server receives to its quorum node.
"""
