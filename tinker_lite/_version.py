"""Version of tinker_lite, and the official SDK release whose wire behaviour it implements."""

__version__ = "0.1.0"

# docs/protocol.rst §1.1: the `sdk_version` sent to the service names the official SDK release
# whose wire behaviour tinker_lite follows; TINKER_LITE_SDK_VERSION overrides it.
WIRE_SDK_VERSION = "0.38.0"
