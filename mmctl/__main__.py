from mmctl._entry import run

run()
