"""The run's settings: options, ini keys and the environment (command line > ini >
environment > defaults) resolved into one frozen ``Settings``; the models list; sampling."""
