"""Settings for the upstream client."""

MAX_RETRY = 3            # retries after the first attempt
BACKOFF_S = 0.5          # the first wait; it doubles on every retry
MAX_RETRY_DELAY_S = 4.0  # no single wait is longer than this
