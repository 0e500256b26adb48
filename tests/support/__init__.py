"""Helpers shared by the test modules and the load tests: loopback ports, the service in a
thread or as processes, example bodies, batch data, the API fuzzer. Test modules import
helpers from here, never from one another."""
