# 采集性能数据
msprof --application="python train.py" --output=./prof_data

# 生成分析报告
msprof --analyze=./prof_data --format=html
