"""Types shared by the server, the store and the SDK. Depends on nothing else in the package."""
