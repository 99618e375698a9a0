"""Unit tests of the Dynamo pod-template builder."""
