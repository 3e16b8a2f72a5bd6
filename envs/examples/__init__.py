"""Small worked examples of LOPD Gym environments."""
