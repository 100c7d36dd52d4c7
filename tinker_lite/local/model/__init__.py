"""The tiny numpy model: kernels, network, losses, optimizers, inputs, decoding, vocabulary.

It imports numpy and the standard library only.
"""
