import sys
from pathlib import Path

# Test helpers (deliberately faulty gateware) live beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
