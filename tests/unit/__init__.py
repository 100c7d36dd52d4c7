"""Unit tests of one layer each, with fakes, fake clocks and scripted loopback servers."""
