"""xbench: write a tensor operator once; compile, verify, profile and tune it on CPU, CUDA and Ascend."""
