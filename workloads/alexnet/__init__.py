"""AlexNet inference (random weights, 224 x 224): a classic CNN to check archsim's GPU predictions."""
