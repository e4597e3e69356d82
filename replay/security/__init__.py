"""Pure security rules: what a stored credential is and how its keys are derived.

Below the service, so replay (which checks every stored credential) and the controller (which
derives one from an AlterUserScramCredentials upsertion) use one declaration of each limit.
The SASL exchanges, TLS and client configs stay in `api.security`.
"""
