"""torchair.logger: a standard logging.Logger named "torchair"."""

import logging

logger = logging.getLogger("torchair")
