"""pytest settings for the chapter notebooks, which nbval collects (see pytest.ini).

nbval waits a hard-coded 5 seconds for each output message after a cell has finished; on a busy
machine the kernel can take longer to report that it is idle after a long cell (the training in
chapter 2), and the cell then fails although it ran. Give it a minute.
"""

from nbval.plugin import IPyNbCell

OUTPUT_TIMEOUT_S = 60


def pytest_collection_modifyitems(items):
    for item in items:
        if isinstance(item, IPyNbCell):
            item.output_timeout = OUTPUT_TIMEOUT_S
