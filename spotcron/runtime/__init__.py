"""What runs inside the deployed Cloud Functions: the handlers behind functions/main.py, the
Google-backed dependencies built from the function's environment, JSON logging, and the
cloud-init document every job VM boots with.

Together with core/, cost/, engine/ and gcp/ this is all that deploy ships to the functions.
"""
