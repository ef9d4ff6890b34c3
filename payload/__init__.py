"""GPT-2 pretraining payload: `torchrun payload/train.py --help`."""
